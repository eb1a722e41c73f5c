"""The coordinators: group/ (classic and consumer groups, offsets), txn/ (transactions) and share/ (share-group
state, KIP-932), each over its internal topic; partitioning.py maps a key to its partition of that topic."""
