# Stub until the operations issue, not built or tested here: torch==2.13.0 is a local CPU wheel on
# these machines; elsewhere install a CPU build of it (e.g. from the PyTorch CPU index) first.
FROM python:3.11-slim
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir torch==2.13.0 \
 && pip install --no-cache-dir -e .
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false LIMINALIS_DATA_DIR=/data
VOLUME ["/data"]
CMD ["liminalis", "serve"]
