"""Who a client is and what it may do: TLS listeners and certificate principals, SASL (sasl/), ACLs and the
authorizer, and the security of this node's own connections to the other nodes."""
