"""What a person sees: style, renderers, panels, display, the status bar, the browser, the timeline,
reports. The only band that imports ipywidgets (lazily) and draws."""
