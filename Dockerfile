# couchlink, built from source in one stage and run from a slim image in the next.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY couchdb/validate_doc_update.js couchdb/security.json ./couchdb/
RUN cargo build --release --locked

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 couchlink \
 && mkdir -p /var/log/couchlink && chown couchlink /var/log/couchlink
COPY --from=build /src/target/release/couchlink /usr/local/bin/couchlink
USER couchlink
ENV COUCHLINK_LOG_DIR=/var/log/couchlink \
    COUCHLINK_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["couchlink"]
CMD ["serve"]
