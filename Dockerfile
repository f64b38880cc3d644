# Tollgate: token endpoint (7080) and object gateway (9000).
#   docker build -t tollgate .
#   openssl rand -base64 32 > root-secret.txt && chmod 0400 root-secret.txt && sudo chown 10001 root-secret.txt
#   docker run -p 7080:7080 -p 9000:9000 -v tollgate-data:/var/lib/tollgate \
#     -v "$PWD/root-secret.txt:/run/secrets/root_secret:ro" \
#     -e TOLLGATE_ACCESS_KEY_SECRET_FILE=/run/secrets/root_secret tollgate
# Make the secret once and keep it: every token is signed with it. Without one, the first start
# generates a secret into the volume and prints it once (docker logs). Every command reads
# $TOLLGATE_CONFIG, so `docker exec CONTAINER tollgate token issue` needs no flags.
# compose.yaml runs it behind a TLS proxy. .ci/rootfs-check.sh proves this runtime stage (its
# packages, user, files, ENV, CMD and HEALTHCHECK, read from here) in a Debian root file system.

FROM swift:6.3.1-bookworm AS build
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

FROM debian:12.12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libsqlite3-0 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/tollgate --shell /usr/sbin/nologin tollgate \
 && mkdir -p /var/lib/tollgate /etc/tollgate \
 && chown tollgate:tollgate /var/lib/tollgate && chmod 0700 /var/lib/tollgate
COPY --from=build /usr/local/bin/tollgate /usr/local/bin/tollgate
COPY config.json /etc/tollgate/config.json
COPY policy /etc/tollgate/policy
# Data (objects, metadata, a generated root secret) lives in the volume; the root secret can
# instead come from TOLLGATE_ACCESS_KEY_SECRET_FILE (a Docker secret) or TOLLGATE_ACCESS_KEY_SECRET.
ENV TOLLGATE_CONFIG=/etc/tollgate/config.json TOLLGATE_DATA_DIR=/var/lib/tollgate
VOLUME /var/lib/tollgate
USER tollgate
WORKDIR /var/lib/tollgate
EXPOSE 7080 9000
# Asks the token endpoint on the port config.json names.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["tollgate", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["tollgate"]
CMD ["serve"]
