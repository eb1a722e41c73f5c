"""The request path: listeners' connections (framing, one request in flight, backpressure), the request
memory budget, the dispatch table from API key to handler, and what a handler is given and returns."""
