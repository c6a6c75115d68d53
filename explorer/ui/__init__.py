"""The Streamlit app (the only package that imports Streamlit): state, sidebar, views, caches.

``app.py`` calls :func:`explorer.ui.page.run`; everything below it takes the core's results and
draws them.
"""
