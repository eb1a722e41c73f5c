"""The coordinators: group/ (classic and consumer groups, offsets) and txn/ (transactions), each over its
internal topic; partitioning.py maps a key to its partition of that topic."""
