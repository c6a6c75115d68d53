"""One module per tab of the page; each takes the :class:`~explorer.ui.cache.ViewData` it draws."""
