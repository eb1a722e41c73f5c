"""Wire-level helpers: framing, headers, API class table and the record-batch v2 header view."""
