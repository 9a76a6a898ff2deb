"""Reuse keys: what an artifact was made from, graph walks, file identities, slot decisions."""
