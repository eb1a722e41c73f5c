"""Cluster metadata (issue 16): records in the metadata quorum's log, the image every node builds from
them, replica placement, and the active controller's decisions. Imported only on a multi-node quorum."""
