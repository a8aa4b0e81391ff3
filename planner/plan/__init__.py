"""The plan: its types and summary metrics (types), the builder that turns a solution into one
(build), and the room left under each limit (slack)."""
