"""Project scripts (the Apache Kafka reference lab)."""
