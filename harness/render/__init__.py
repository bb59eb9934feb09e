"""Turns analyses into text: Markdown reports (jinja2 templates), tables. No analysis of its own."""
