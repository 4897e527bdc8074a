module github.com/runbook/runbook/deploy

go 1.26.8

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/docker/docker-credential-helpers v0.9.5 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
