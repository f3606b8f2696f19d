"""The report: its model, the HTML and Markdown pages and their charts."""
