"""SASL authentication as Kafka's SaslServerAuthenticator does it: JAAS config (jaas.py), the PLAIN and
SCRAM mechanisms (plain.py, scram.py), the broker's SCRAM credentials (credentials.py), per-listener
settings (settings.py) and the per-connection state machine (authenticator.py). Independent of the
transport: a SASL_SSL connection runs the same authenticator over TLS."""
