"""The transaction coordinator (Kafka's TransactionCoordinator over its TransactionStateManager): the state
of each transactional id in `__transaction_state`, markers to the partitions, and producer ids."""
