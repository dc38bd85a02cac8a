# Stub until the operations issue: builds the same environment as `make run`.
FROM python:3.11-slim
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir torch==2.13.0 \
 && pip install --no-cache-dir -e .
ENV HF_HUB_OFFLINE=1 LIMINALIS_DATA_DIR=/data
VOLUME ["/data"]
CMD ["liminalis", "serve"]
