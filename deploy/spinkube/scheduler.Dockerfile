# The image of the scheduler (`mneme cron`) and of the migration Job
# (`mneme-migrate`), for deploy/spinkube. Build it from the repository's
# root, so that it carries this checkout's spin.toml:
#
#   docker build -f deploy/spinkube/scheduler.Dockerfile \
#     -t localhost:5000/mneme-scheduler:0.1.0 .
#
# The tag is the application's version, as the SpinApp's image is.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p mneme-runner

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/mneme /usr/local/bin/mneme
COPY --chmod=0755 deploy/spinkube/migrate.sh /usr/local/bin/mneme-migrate
# The schedules `mneme cron` runs: the manifest of the app built from the
# same checkout (only its [application.tool.mneme] table is used).
COPY spin.toml /etc/mneme/spin.toml
USER 65532:65532
WORKDIR /etc/mneme
ENTRYPOINT ["mneme"]
CMD ["cron", "--url", "http://mneme", "-f", "/etc/mneme/spin.toml"]
