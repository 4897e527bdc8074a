package network

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/runbook/runbook/internal/cloud/network"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/suggest"
)

type imageParams struct {
	connParam
	Name string `json:"name" required:"true" maxlen:"255" desc:"image name, e.g. Ubuntu Server 22.04.3 LTS (the spec's base images: CentOS 7.9, Debian 11.8 Bullseye, Rocky Linux 8.9, Ubuntu Server 20.04.6 LTS, Ubuntu Server 22.04.3 LTS)"`
}

// maxNamesShown bounds the names an unknown-image error lists.
const maxNamesShown = 40

func init() {
	steps.Register(steps.Define(steps.Def[imageParams]{
		Type:    "image.find",
		Summary: "Find the UUID of an image by name in the connection's region (node_image of a cluster create, image_id of a node group).",
		Example: map[string]any{"name": "Ubuntu Server 22.04.3 LTS"},
		Outputs: []steps.Output{
			{Name: "image_id", Type: "string", Description: "UUID of the image (base image UUIDs differ per region)"},
			{Name: "name", Type: "string", Description: "its name"},
			{Name: "image", Type: "map", Description: "the image: id, name, status, visibility"},
		},
		Plan: func(p *imageParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet,
				Path: planPath(network.ImagesPath(network.ImageFilter{Name: p.Name}), p.Name),
				Note: "on the image API: the connection's image_url, else the region's host; an unknown name lists the images to name them"}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *imageParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *network.Client) (steps.Outputs, error) {
				imgs, err := cl.ListImages(ctx, network.ImageFilter{Name: p.Name})
				if err != nil {
					return nil, err
				}
				switch len(imgs) {
				case 1:
					i := imgs[0]
					return steps.Outputs{"image_id": i.ID, "name": i.Name,
						"image": map[string]any{"id": i.ID, "name": i.Name, "status": i.Status, "visibility": i.Visibility}}, nil
				case 0:
					return nil, unknownImage(ctx, cl, p.Name)
				}
				ids := make([]string, len(imgs))
				for i, img := range imgs {
					ids[i] = img.ID
				}
				return nil, fault.Errorf(fault.Invalid, "image.find: %d images are named %q (%s); give the UUID instead", len(imgs), p.Name, strings.Join(ids, ", "))
			})
		},
	}))
}

// unknownImage lists the region's images to say which names exist.
func unknownImage(ctx context.Context, cl *network.Client, name string) error {
	all, err := cl.ListImages(ctx, network.ImageFilter{})
	if err != nil {
		return fmt.Errorf("image.find: no image named %q; listing the images to name them: %w", name, err)
	}
	var names []string
	for _, i := range all {
		if i.Name != "" && !slices.Contains(names, i.Name) {
			names = append(names, i.Name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fault.Errorf(fault.NotFound, "image.find: no image named %q; the image API lists no images", name)
	}
	shown := names
	more := ""
	if len(shown) > maxNamesShown {
		shown, more = shown[:maxNamesShown], fmt.Sprintf(" and %d more", len(names)-maxNamesShown)
	}
	return fault.Errorf(fault.NotFound, "image.find: no image named %q; the images are: %s%s%s",
		name, strings.Join(shown, ", "), more, suggest.Hint(name, names))
}
