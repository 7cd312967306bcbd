"""Pure static renderings (text, HTML, Markdown strings) of runs, statuses, preset lists and tables: no IPython."""
