package network

import (
	"context"
	"net/url"
	"sort"
	"strings"
)

// Network is a VPC network as GET /v2.0/networks answers it.
type Network struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Status         string   `json:"status"` // ACTIVE, DOWN, BUILD, ERROR
	Subnets        []string `json:"subnets"`
	RouterExternal bool     `json:"router:external"` // attached to the internet gateway
	Shared         bool     `json:"shared"`
	TenantID       string   `json:"tenant_id"`
	AdminStateUp   bool     `json:"admin_state_up"`
}

// Subnet is a VPC subnet as GET /v2.0/subnets answers it.
type Subnet struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	NetworkID string `json:"network_id"`
	CIDR      string `json:"cidr"`
	GatewayIP string `json:"gateway_ip"`
	TenantID  string `json:"tenant_id"`
}

// Image is a base image as GET /v2/images answers it.
type Image struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Visibility string `json:"visibility"`
}

// NetworkFilter selects networks; empty fields and nil pointers do not
// filter.
type NetworkFilter struct {
	ID             string
	Name           string
	Status         string
	TenantID       string
	RouterExternal *bool
	Shared         *bool
}

// SubnetFilter selects subnets.
type SubnetFilter struct {
	ID        string
	Name      string
	NetworkID string
	CIDR      string
}

// ImageFilter selects images.
type ImageFilter struct {
	ID         string
	Name       string
	Visibility string // public, private, shared, community
	Status     string // active, ...
}

// flag spells a boolean filter as the spec does (router:external=True).
func flag(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// encode writes q sorted by key, keeping ':' readable in keys
// (router:external), as the spec writes the query.
func encode(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range q[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(strings.ReplaceAll(url.QueryEscape(k), "%3A", ":"))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
		}
	}
	return "?" + b.String()
}

func set(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

// NetworksPath is the path and query ListNetworks sends for f.
func NetworksPath(f NetworkFilter) string {
	q := url.Values{}
	set(q, "id", f.ID)
	set(q, "name", f.Name)
	set(q, "status", f.Status)
	set(q, "tenant_id", f.TenantID)
	if f.RouterExternal != nil {
		q.Set("router:external", flag(*f.RouterExternal))
	}
	if f.Shared != nil {
		q.Set("shared", flag(*f.Shared))
	}
	return "/v2.0/networks" + encode(q)
}

// SubnetsPath is the path and query ListSubnets sends for f.
func SubnetsPath(f SubnetFilter) string {
	q := url.Values{}
	set(q, "id", f.ID)
	set(q, "name", f.Name)
	set(q, "network_id", f.NetworkID)
	set(q, "cidr", f.CIDR)
	return "/v2.0/subnets" + encode(q)
}

// ImagesPath is the path and query ListImages sends first for f.
func ImagesPath(f ImageFilter) string {
	q := url.Values{}
	set(q, "id", f.ID)
	set(q, "name", f.Name)
	set(q, "visibility", f.Visibility)
	set(q, "status", f.Status)
	return "/v2/images" + encode(q)
}

// ListNetworks lists the networks f selects, in the API's order.
func (c *Client) ListNetworks(ctx context.Context, f NetworkFilter) ([]Network, error) {
	var out struct {
		Networks []Network `json:"networks"`
	}
	if err := c.get(ctx, c.network, NetworksPath(f), &out); err != nil {
		return nil, err
	}
	return out.Networks, nil
}

// GetNetwork reads one network by UUID.
func (c *Client) GetNetwork(ctx context.Context, id string) (*Network, error) {
	if strings.TrimSpace(id) == "" {
		return nil, &Error{Class: Invalid, Message: "network: network id is empty"}
	}
	var out struct {
		Network Network `json:"network"`
	}
	if err := c.get(ctx, c.network, "/v2.0/networks/"+url.PathEscape(id), &out); err != nil {
		return nil, err
	}
	return &out.Network, nil
}

// ListSubnets lists the subnets f selects, in the API's order.
func (c *Client) ListSubnets(ctx context.Context, f SubnetFilter) ([]Subnet, error) {
	var out struct {
		Subnets []Subnet `json:"subnets"`
	}
	if err := c.get(ctx, c.network, SubnetsPath(f), &out); err != nil {
		return nil, err
	}
	return out.Subnets, nil
}

// ListImages lists the images f selects, following Glance's next links
// (at most 100 pages).
func (c *Client) ListImages(ctx context.Context, f ImageFilter) ([]Image, error) {
	var all []Image
	path := ImagesPath(f)
	for page := 0; path != ""; page++ {
		if page == maxPages {
			return nil, &Error{Class: Internal, Op: "GET " + ImagesPath(f), Message: "more than 100 pages of images"}
		}
		var out struct {
			Images []Image `json:"images"`
			Next   string  `json:"next"`
		}
		if err := c.get(ctx, c.image, path, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Images...)
		path = nextPath(out.Next)
	}
	return all, nil
}

// nextPath reads Glance's next link ("/v2/images?marker=..."), which is
// relative to the image API's base URL; an absolute link keeps only its
// path and query below /v2.
func nextPath(next string) string {
	if next == "" {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil {
		return ""
	}
	p := u.Path
	if i := strings.Index(p, "/v2/"); i > 0 {
		p = p[i:]
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
