# couchlink, built from source in one stage and run from a slim image in the next.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY couchdb/validate_doc_update.js ./couchdb/
RUN cargo build --release --locked

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 couchlink \
 && mkdir -p /var/log/couchlink /var/lib/couchlink \
 && chown couchlink /var/log/couchlink /var/lib/couchlink
COPY --from=build /src/target/release/couchlink /usr/local/bin/couchlink
USER couchlink
# The cache snapshot lives in /var/lib/couchlink: give it a volume so that a new container
# starts from it (a named volume starts out owned by couchlink, as this folder is).
ENV COUCHLINK_LOG_DIR=/var/log/couchlink \
    COUCHLINK_STATE_DIR=/var/lib/couchlink \
    COUCHLINK_LISTEN=0.0.0.0:8080
EXPOSE 8080
# Healthy while /healthz answers 200 on the admin listener (port 9090, as the compose files set
# it; CouchDB reachable and the feed live).
# The image has bash but no HTTP client, hence /dev/tcp.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["couchlink"]
CMD ["serve"]
