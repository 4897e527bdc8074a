# The image `make image` builds without Docker (deploy/image), for those who
# build with Docker: the same files, user, environment, command and labels
# (deploy/image/dockerfile_test.go compares them). Build it with the values
# make stamps, so that `runbook version` names the commit:
#
#   docker build -t runbook:$(make -s version) \
#     --build-arg VERSION=$(make -s version) --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg COMMIT_DATE=$(TZ=UTC0 git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd) .
#
# It has no shell: a playbook's shell steps need an image built FROM this
# one that adds one (docs/deploy.md).
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=v0.0.0-dev
ARG COMMIT=
ARG COMMIT_DATE=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT -X main.commitDate=$COMMIT_DATE" \
      -o /rootfs/usr/local/bin/runbook ./cmd/runbook \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/etc/runbook/playbooks /rootfs/tmp /rootfs/var/lib/runbook \
 && cp deploy/image/rootfs/etc/* /rootfs/etc/ \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && chmod 1777 /rootfs/tmp && chmod 0700 /rootfs/var/lib/runbook

FROM scratch
ARG VERSION=v0.0.0-dev
ARG COMMIT=
ARG COMMIT_DATE=
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /rootfs/var/lib/runbook /var/lib/runbook
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    HOME=/var/lib/runbook \
    RUNBOOK_STATE=/var/lib/runbook/state.db
WORKDIR /var/lib/runbook
EXPOSE 8088/tcp
LABEL org.opencontainers.image.title="runbook" \
      org.opencontainers.image.description="Durable workflow automation for operations teams: YAML playbooks of typed steps, run by runbook serve." \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$COMMIT" \
      org.opencontainers.image.created="$COMMIT_DATE"
ENTRYPOINT ["/usr/local/bin/runbook"]
CMD ["serve", "--listen", "0.0.0.0:8088", "--playbooks", "/etc/runbook/playbooks"]
