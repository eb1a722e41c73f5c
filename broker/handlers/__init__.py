"""One module per API family; importing this package fills the dispatch table."""
from . import (  # noqa: F401
    api_versions,
    cluster,
    configs,
    delete_records,
    describe_producers,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    sasl,
    topics,
)
