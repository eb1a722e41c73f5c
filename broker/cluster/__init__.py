"""A node of a multi-node cluster (issue 16): the metadata image it follows (runtime.py, `state.cluster`)
and, on the metadata quorum's leader, the active controller (active_controller.py). Imported only when
controller.quorum.voters names other nodes."""
