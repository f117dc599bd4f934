"""The node's BMC, out of band over Redfish: its endpoint (address, credentials, the CA that signs
its certificate, from the inventory), a read-only session for checks and facts, and the update
session for apply (push an image, follow its Task, power-cycle the system). Built on DMTF's
`redfish` library; TLS is always verified."""
