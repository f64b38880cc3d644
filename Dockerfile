# Tollgate: token endpoint (7080) and object gateway (9000).
#   docker build -t tollgate .
#   docker run -p 7080:7080 -p 9000:9000 -v tollgate-data:/var/lib/tollgate \
#     -e TOLLGATE_ACCESS_KEY_SECRET="$(openssl rand -base64 32)" tollgate

FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl-dev libsqlite3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY bench ./bench
COPY .ci ./.ci
# The same script .ci/run runs and proves.
RUN cp "$(bash .ci/build-release.sh)" /usr/local/bin/tollgate

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libsqlite3-0 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/tollgate --shell /usr/sbin/nologin tollgate \
 && mkdir -p /var/lib/tollgate /etc/tollgate \
 && chown tollgate:tollgate /var/lib/tollgate && chmod 0700 /var/lib/tollgate
COPY --from=build /usr/local/bin/tollgate /usr/local/bin/tollgate
COPY config.json /etc/tollgate/config.json
COPY policy /etc/tollgate/policy
# Data (objects, metadata, a generated root secret) lives in the volume; the root secret can
# instead come from TOLLGATE_ACCESS_KEY_SECRET (and TOLLGATE_ACCESS_KEY_ID).
ENV TOLLGATE_DATA_DIR=/var/lib/tollgate
VOLUME /var/lib/tollgate
USER tollgate
WORKDIR /var/lib/tollgate
EXPOSE 7080 9000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS http://127.0.0.1:7080/healthz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["tollgate"]
CMD ["serve", "--config", "/etc/tollgate/config.json"]
