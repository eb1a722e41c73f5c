"""The `minikafka` command line (main.py): serve, topics, groups, transactions, producers, faults, storage."""
