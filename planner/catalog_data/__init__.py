"""Catalog data shipped with the package: accelerators, nodes, links and models (YAML)."""
