"""What a person sees live: kernel detection, the text renderer, widget panels, display choice, the status bar,
the browser, the timeline, and ``attach`` (how the notebook edge hooks itself onto the bands below). The only
band that imports ipywidgets (lazily) and draws; static renderings live in ``nbsubagents._views``."""
