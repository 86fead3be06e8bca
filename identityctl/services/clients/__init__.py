"""Applications as OAuth clients: who a client is and how it proves it (``client``,
``keys``), the grants people gave them and their end (``grants``, ``revocation``), the
resource servers their tokens are for (``resource_servers``), and the one check of a
presented bearer token (``bearer``, with DPoP proofs in ``dpop``).
"""
