# syntax=docker/dockerfile:1
#
# One image with every process of the service (api, worker-provisioning, worker-webhooks,
# worker-recheck, worker-payouts, provider-sandbox) in /usr/local/bin; docker-compose.yml picks one per service.
#
#   docker build -t virtual-account-service .
#
# Needs BuildKit (the default builder of current Docker) for the cache mounts: the crates.io
# registry and the target folder are kept between builds, so a change to the code recompiles
# the workspace only, not its dependencies. Nothing is downloaded but crates (crates.io) and
# Debian packages.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /app
# .cargo/config.toml puts the target folder in /tmp/vas-target for developers; in the image it is
# /app/target, a cache mount.
ENV CARGO_TARGET_DIR=/app/target \
    CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
COPY . .
# The binaries live in the cache mount, which is not part of the image: copy them out in the same
# step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/app/target,sharing=locked \
    cargo build --release --locked --bins \
        -p api-bin -p worker-provisioning -p worker-webhooks -p worker-recheck -p worker-payouts \
        -p provider-sandbox \
 && mkdir -p /out \
 && cp target/release/api \
       target/release/worker-provisioning \
       target/release/worker-webhooks \
       target/release/worker-recheck \
       target/release/worker-payouts \
       target/release/provider-sandbox \
       /out/

FROM debian:bookworm-slim AS runtime
# ca-certificates for HTTPS to provider banks and webhook endpoints; curl for health checks.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
# A non-root user whose home is the working directory (and the place for a sandbox state file).
RUN groupadd --system --gid 10001 vas \
 && useradd --system --uid 10001 --gid vas --home-dir /var/lib/vas --create-home \
        --shell /usr/sbin/nologin vas
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/vas
# No transparent huge pages for mimalloc even on a host whose setting is `always`
# (docs/operations/scaling.md).
ENV MIMALLOC_ALLOW_THP=0
# api (VAS_HTTP__BIND), provider-sandbox (VAS_SANDBOX__BIND), a worker's ops port (VAS_OPS__BIND).
EXPOSE 8080 8090 9100
# Every process stops on SIGTERM after finishing in-flight work.
STOPSIGNAL SIGTERM
CMD ["api", "serve"]
