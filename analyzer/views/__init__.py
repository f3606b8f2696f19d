"""Views of the store: usage tables, incident lists, show, export."""
