"""JSON message schemas of APIs that kafka-python does not ship, in Kafka's schema format, loaded by
kafka-python's ApiMessage machinery (`load_json=<this package>`); see protocol/messages.py."""
