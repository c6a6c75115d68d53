# CommExplorer for a team: the Streamlit app with the shipped scenarios, on port 8501.
#   docker build -t commexplorer .
#   docker run --rm -p 8501:8501 commexplorer        # then open http://localhost:8501
# The image holds what the app reads and nothing else: app.py, the explorer package (its data
# tables included), the shipped scenarios and Streamlit's settings (.streamlit/config.toml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

WORKDIR /app
# Dependencies first: a change of the code does not reinstall them.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY app.py ./
COPY .streamlit ./.streamlit
COPY explorer ./explorer
COPY scenarios ./scenarios

# Not root: the app writes nothing but Streamlit's own caches.
RUN useradd --create-home --uid 10001 explorer
USER explorer

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
# 0.0.0.0: reachable from outside the container (Streamlit's default is every interface too).
CMD ["streamlit", "run", "app.py", "--server.headless", "true", "--server.port", "8501", "--server.address", "0.0.0.0"]
