# syntax=docker/dockerfile:1
# The bot: `liminalis serve` on the CPU, with the shipped models and no campaign baked in.
#   docker build -t liminalis .
#   docker run -d --env-file .env -v liminalis-data:/data -v "$PWD/campaigns:/campaigns:ro" liminalis
#   docker run --rm --env-file .env liminalis doctor       (any `liminalis` command)
# compose.yaml runs it, alone (Milvus Lite in /data) or beside a Milvus server. CI cannot run
# Docker: the commands this file calls (`serve`, `health`, `doctor`) are tested without it.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false

# 1. Dependencies, read from pyproject.toml alone, so this layer is rebuilt only when they
#    change. torch first: the CPU build from PyTorch's index (PyPI's pulls gigabytes of CUDA);
#    the range in pyproject.toml is then satisfied and nothing replaces it.
WORKDIR /src
COPY pyproject.toml ./
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
 && python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# 2. The shipped models (found through LIMINALIS_MODELS_DIR), and the sample campaign for a demo
#    (LIMINALIS_CAMPAIGNS_DIR=/opt/liminalis/sample-campaigns); real campaigns mount at /campaigns.
COPY models/ /opt/liminalis/models/
COPY campaigns/emberfall/ /opt/liminalis/sample-campaigns/emberfall/

# 3. The code, last: an edit rebuilds only this layer.
COPY README.md ./
COPY liminalis/ liminalis/
COPY bot/ bot/
RUN pip install --no-deps . && cd / && rm -rf /src

RUN useradd --system --uid 10001 --create-home --home-dir /home/liminalis liminalis \
 && mkdir -p /data /campaigns \
 && chown liminalis:liminalis /data /campaigns
USER liminalis
WORKDIR /home/liminalis
ENV LIMINALIS_DATA_DIR=/data \
    LIMINALIS_CAMPAIGNS_DIR=/campaigns \
    LIMINALIS_MODELS_DIR=/opt/liminalis/models
VOLUME ["/data", "/campaigns"]

# The database, the data directory, the vector store, the models' files and serve's status
# file (every platform connected, written every 30 s): see `liminalis health --help`.
HEALTHCHECK --interval=60s --timeout=30s --start-period=180s --retries=3 \
    CMD ["liminalis", "health"]
ENTRYPOINT ["liminalis"]
CMD ["serve"]
