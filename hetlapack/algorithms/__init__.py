"""Tile algorithms written once as serial task insertion: potrf, getrf, geqrf (+ orgqr)."""
