"""Client quotas (KIP-13 / KIP-546 / KIP-599): the stored quotas and their validation (model.py), the
single node's store (store.py) and their enforcement (manager.py)."""
