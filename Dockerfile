# The operator's image: `docker build -t <registry>/etcd-operator:v0.1.0 .`
# (deploy/operator/deployment.yaml and the Helm chart's image.repository name the image to run).
# Not built by the project's CI, which has no container engine.

FROM docker.io/library/rust:1.95-bookworm AS build
# etcd-client compiles etcd's protobuf definitions at build time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p etcd-operator --bin etcd-operator

# glibc and CA certificates, no shell; runs as 65532, as the Deployment requires.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/etcd-operator /etcd-operator
USER 65532:65532
ENTRYPOINT ["/etcd-operator"]
