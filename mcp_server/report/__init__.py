"""The experiment report: its content, its plots, its self-contained HTML page."""
