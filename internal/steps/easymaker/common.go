package easymaker

import (
	"context"
	"fmt"
	"strings"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// defaultConnection is the connection ML steps use unless told.
const defaultConnection = "easymaker"

// storagePattern is the form of every storage path the SDK takes: object
// storage obs://{host}/v1/AUTH_{tenant}/{container}/{path} or NAS nas://...
const storagePattern = `^(obs|nas)://\S+$`

// Params every ML step shares.

type connParam struct {
	Connection string `json:"connection" default:"easymaker" minlen:"1" desc:"name of the connection to the AI EasyMaker API (appkey, secret key or access key, region)"`
}

// waitParams are the wait semantics of every create and run.
type waitParams struct {
	Wait         bool           `json:"wait" default:"true" desc:"wait until the resource is COMPLETE, ACTIVE or ENABLED (a status containing FAIL or STOP fails the step); false returns the ID right after the create request, as the SDK's wait=False"`
	PollInterval steps.Duration `json:"poll_interval" default:"10s" min:"1s" max:"1h" desc:"time between two reads of the resource while waiting (the SDK re-reads every 10s)"`
	Timeout      steps.Duration `json:"timeout" default:"24h" min:"1s" max:"720h" desc:"how long wait waits (runbook's own limit; never beyond timeout_hours where the resource has one)"`
}

// Tag is one element of tag_list.
type Tag struct {
	TagKey   string `json:"tagKey" required:"true" maxlen:"64" desc:"tag key, up to 64 characters"`
	TagValue string `json:"tagValue" maxlen:"255" desc:"tag value, up to 255 characters"`
}

// Dataset is one element of dataset_list. The spec's tables call the path
// datasetUri and its samples dataUri: either is accepted (not both).
type Dataset struct {
	DatasetName string `json:"datasetName" required:"true" maxlen:"36" desc:"dataset name, up to 36 characters (e.g. train, test)"`
	DataURI     string `json:"dataUri" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"where the data is: obs://{host}/v1/AUTH_{tenant}/{container}/{path} or nas://..., up to 255 characters"`
	DatasetURI  string `json:"datasetUri" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"the same path under the name the spec's tables use"`
}

func (d Dataset) uri() string {
	if d.DataURI != "" {
		return d.DataURI
	}
	return d.DatasetURI
}

// Hyperparameter is one element of hyperparameter_list.
type Hyperparameter struct {
	HyperparameterKey   string `json:"hyperparameterKey" required:"true" maxlen:"255" desc:"hyperparameter name, up to 255 characters"`
	HyperparameterValue string `json:"hyperparameterValue" maxlen:"1000" desc:"its value as a string, up to 1000 characters"`
}

// ModelResource is one element of endpoint_model_resource_list.
type ModelResource struct {
	ModelID          string `json:"modelId" required:"true" maxlen:"36" desc:"ID of the model to serve"`
	APIGWResourceURI string `json:"apigwResourceUri" required:"true" maxlen:"255" pattern:"^/" desc:"API gateway resource path the model is served under; starts with /, up to 255 characters"`
	PodCount         int    `json:"podCount" required:"true" min:"1" max:"100" desc:"number of pods, 1 to 100"`
	Description      string `json:"description" maxlen:"255" desc:"up to 255 characters"`
}

func tags(ts []Tag) []easymaker.Tag {
	if len(ts) == 0 {
		return nil
	}
	out := make([]easymaker.Tag, len(ts))
	for i, t := range ts {
		out[i] = easymaker.Tag{TagKey: t.TagKey, TagValue: t.TagValue}
	}
	return out
}

// param is the key the element's path is given under.
func (d Dataset) param() string {
	if d.DataURI == "" && d.DatasetURI != "" {
		return "datasetUri"
	}
	return "dataUri"
}

func datasets(ds []Dataset) []easymaker.Dataset {
	if len(ds) == 0 {
		return nil
	}
	out := make([]easymaker.Dataset, len(ds))
	for i, d := range ds {
		out[i] = easymaker.Dataset{DatasetName: d.DatasetName, DataURI: d.uri()}
	}
	return out
}

func hyperparameters(hs []Hyperparameter) []easymaker.Hyperparameter {
	if len(hs) == 0 {
		return nil
	}
	out := make([]easymaker.Hyperparameter, len(hs))
	for i, h := range hs {
		out[i] = easymaker.Hyperparameter{HyperparameterKey: h.HyperparameterKey, HyperparameterValue: h.HyperparameterValue}
	}
	return out
}

func modelResources(rs []ModelResource) []easymaker.ModelResource {
	out := make([]easymaker.ModelResource, len(rs))
	for i, r := range rs {
		out[i] = easymaker.ModelResource{ModelID: r.ModelID, APIGWResourceURI: r.APIGWResourceURI, PodCount: r.PodCount, Description: r.Description}
	}
	return out
}

// clientFor builds the AI EasyMaker client of the step's connection.
func clientFor(c *steps.Call, connection string) (*easymaker.Client, error) {
	if connection == "" {
		connection = defaultConnection
	}
	conn, err := c.Host.Connection(connection)
	if err != nil {
		return nil, err
	}
	cfg, err := easymaker.ConfigFrom(conn)
	if err != nil {
		return nil, err
	}
	return easymaker.New(cfg)
}

// apiPath is the path of a collection as `runbook plan` shows it (the
// appkey comes from the connection at run time).
func apiPath(segments ...string) string {
	return "/v1.0/appkeys/{appkey}/" + strings.Join(segments, "/")
}

// problems collects the findings of the Check funcs.
type problems []fault.Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, fault.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// known adds the findings of a rule of internal/cloud/easymaker, except
// those at a path computed by an expression: its value is judged when the
// step runs.
func (ps *problems) known(dyn map[string]bool, found []fault.Problem) {
	for _, p := range found {
		if !dyn[p.Path] {
			*ps = append(*ps, p)
		}
	}
}

// checkStorage applies easymaker.DataStorageRequired: data_storage_size
// when an input path is in object storage. Not judged when the size or an
// input is computed by an expression.
func (ps *problems) checkStorage(dyn map[string]bool, size int, inputs []easymaker.StorageInput, inputFields ...string) {
	if dyn["data_storage_size"] {
		return
	}
	for _, f := range inputFields {
		if dyn[f] {
			return
		}
	}
	*ps = append(*ps, easymaker.DataStorageRequired(size, inputs...)...)
}

// checkAlgorithm applies easymaker.AlgorithmChoice: exactly one of a
// provided algorithm (algorithm_name) and an own one (source_dir_uri +
// entry_point).
func (ps *problems) checkAlgorithm(dyn map[string]bool, name, sourceDir, entry string) {
	if dyn["algorithm_name"] || dyn["source_dir_uri"] || dyn["entry_point"] {
		return
	}
	*ps = append(*ps, easymaker.AlgorithmChoice("algorithm_name", name, sourceDir, entry)...)
}

// checkTorchrun: nproc_per_node only with use_torchrun.
func (ps *problems) checkTorchrun(dyn map[string]bool, use bool, nproc int) {
	if dyn["use_torchrun"] || dyn["nproc_per_node"] {
		return
	}
	if easymaker.NprocWithoutTorchrun(use, nproc) {
		ps.add("nproc_per_node", "is only used with use_torchrun: true (PyTorch images); set use_torchrun or drop nproc_per_node")
	}
}

// checkDatasets: each element names its path once (not both keys).
func (ps *problems) checkDatasets(dyn map[string]bool, ds []Dataset) {
	if dyn["dataset_list"] {
		return
	}
	for i, d := range ds {
		if d.DataURI != "" && d.DatasetURI != "" {
			ps.add(fmt.Sprintf("dataset_list[%d].datasetUri", i), "give the path once, as dataUri or datasetUri")
		}
	}
}

// checkDatasetPaths requires each dataset's path. An element, or a path in
// it, computed by an expression is not judged at load time; at run time
// its value is.
func (ps *problems) checkDatasetPaths(dyn map[string]bool, ds []Dataset) {
	if dyn["dataset_list"] {
		return
	}
	for i, d := range ds {
		at := fmt.Sprintf("dataset_list[%d]", i)
		if dyn[at] || dyn[at+".dataUri"] || dyn[at+".datasetUri"] {
			continue
		}
		if d.DataURI == "" && d.DatasetURI == "" {
			ps.add(at+".dataUri", "is required (the dataset's obs:// or nas:// path)")
		}
	}
}

// checkResources applies easymaker.RepeatedResourceURIs: apigwResourceUri
// values are distinct in one list.
func (ps *problems) checkResources(dyn map[string]bool, rs []ModelResource) {
	if dyn["endpoint_model_resource_list"] {
		return
	}
	*ps = append(*ps, easymaker.RepeatedResourceURIs(modelResources(rs))...)
}

// read runs a read-only call with a client for conn.
func read(ctx context.Context, c *steps.Call, conn string, f func(cl *easymaker.Client) (steps.Outputs, error)) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.StepID, err)
	}
	cl, err := clientFor(c, conn)
	if err != nil {
		return nil, err
	}
	return f(cl)
}

func tagViews(ts []easymaker.Tag) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = map[string]any{"tagKey": t.TagKey, "tagValue": t.TagValue}
	}
	return out
}

func metricMap(ms []easymaker.Metric) map[string]any {
	out := make(map[string]any, len(ms))
	for _, m := range ms {
		out[m.MetricName] = m.MetricValue
	}
	return out
}
