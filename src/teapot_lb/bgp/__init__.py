"""BGP-4 speaker (see module docs)."""
