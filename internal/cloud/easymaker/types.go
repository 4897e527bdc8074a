package easymaker

import (
	"encoding/json"
	"time"
)

// Status codes on the wire (spec/FIDELITY.md). StatusDone decides what a
// wait does with them.
const (
	StatusCreateRequested            = "CREATE_REQUESTED"
	StatusCreateInProgress           = "CREATE_IN_PROGRESS"
	StatusCreateFailed               = "CREATE_FAILED"
	StatusActive                     = "ACTIVE"
	StatusRunning                    = "RUNNING"
	StatusCompleteInProgress         = "COMPLETE_IN_PROGRESS"
	StatusComplete                   = "COMPLETE"
	StatusStopInProgress             = "STOP_IN_PROGRESS"
	StatusStopped                    = "STOPPED"
	StatusFailTrainInProgress        = "FAIL_TRAIN_IN_PROGRESS"
	StatusFailTrain                  = "FAIL_TRAIN"
	StatusFailHyperparameterTuning   = "FAIL_HYPERPARAMETER_TUNING"
	StatusFailHyperparameterTuningIP = "FAIL_HYPERPARAMETER_TUNING_IN_PROGRESS"
	StatusUpdateInProgress           = "UPDATE_IN_PROGRESS"
	StatusUpdateFailed               = "UPDATE_FAILED"
	StatusDeleteInProgress           = "DELETE_IN_PROGRESS"
	StatusDeployInProgress           = "DEPLOY_IN_PROGRESS"
	StatusDeployFailed               = "DEPLOY_FAILED"
	StatusFailBatchInference         = "FAIL_BATCH_INFERENCE"
	StatusFailBatchInferenceIP       = "FAIL_BATCH_INFERENCE_IN_PROGRESS"
)

// Framework codes of Model create_by_model_uri.
const (
	FrameworkTensorFlow = "TENSORFLOW"
	FrameworkPyTorch    = "PYTORCH"
)

// Tuning enums (the SDK's constants).
const (
	ObjectiveMinimize       = "MINIMIZE"
	ObjectiveMaximize       = "MAXIMIZE"
	StrategyBayesian        = "BAYESIAN_OPTIMIZATION"
	StrategyGrid            = "GRID"
	StrategyRandom          = "RANDOM"
	EarlyStoppingMedian     = "MEDIAN"
	HyperparameterTypeInt   = "INT"
	HyperparameterTypeFloat = "DOUBLE"
	HyperparameterTypeDisc  = "DISCRETE"
	HyperparameterTypeCat   = "CATEGORICAL"
	InputDataTypeJSON       = "JSON"
	InputDataTypeJSONL      = "JSONL"
)

// Header is the envelope header of every answer.
type Header struct {
	IsSuccessful  bool   `json:"isSuccessful"`
	ResultCode    int    `json:"resultCode"`
	ResultMessage string `json:"resultMessage"`
}

// Paging is the paging block of a list answer: Page is 1-based, Limit the
// page size asked for, TotalCount the number of items over all pages.
type Paging struct {
	Page       int `json:"page"`
	Limit      int `json:"limit"`
	TotalCount int `json:"totalCount"`
}

// Tag is one element of tag_list (tagKey up to 64, tagValue up to 255).
type Tag struct {
	TagKey   string `json:"tagKey"`
	TagValue string `json:"tagValue"`
}

// Dataset is one element of dataset_list. The spec's tables call the path
// datasetUri and its samples dataUri: it is sent under both and read from
// either.
type Dataset struct {
	DatasetName string `json:"datasetName"`
	DataURI     string `json:"dataUri"`
}

// MarshalJSON sends the path under both names, dataUri and datasetUri
// (FIDELITY: where sources differ, send both).
func (d Dataset) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		DatasetName string `json:"datasetName"`
		DataURI     string `json:"dataUri"`
		DatasetURI  string `json:"datasetUri"`
	}{d.DatasetName, d.DataURI, d.DataURI})
}

// UnmarshalJSON accepts dataUri and datasetUri.
func (d *Dataset) UnmarshalJSON(b []byte) error {
	var w struct {
		DatasetName string `json:"datasetName"`
		DataURI     string `json:"dataUri"`
		DatasetURI  string `json:"datasetUri"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d.DatasetName, d.DataURI = w.DatasetName, w.DataURI
	if d.DataURI == "" {
		d.DataURI = w.DatasetURI
	}
	return nil
}

// Hyperparameter is one element of hyperparameter_list.
type Hyperparameter struct {
	HyperparameterKey   string `json:"hyperparameterKey"`
	HyperparameterValue string `json:"hyperparameterValue"`
}

// HyperparameterSpec is one element of a tuning's hyperparameter_spec_list.
// Min/Max (and Step for the grid strategy) apply to INT and DOUBLE;
// SpecifiedValues ("a,b,c") to DISCRETE and CATEGORICAL.
type HyperparameterSpec struct {
	HyperparameterName            string   `json:"hyperparameterName,omitempty"`
	HyperparameterTypeCode        string   `json:"hyperparameterTypeCode,omitempty"`
	HyperparameterMinValue        *float64 `json:"hyperparameterMinValue,omitempty"`
	HyperparameterMaxValue        *float64 `json:"hyperparameterMaxValue,omitempty"`
	HyperparameterStep            *float64 `json:"hyperparameterStep,omitempty"`
	HyperparameterSpecifiedValues string   `json:"hyperparameterSpecifiedValues,omitempty"`
}

// Metric is one metric value a training reported.
type Metric struct {
	MetricName  string  `json:"metricName"`
	MetricValue float64 `json:"metricValue"`
}

// ModelResource is one element of endpoint_model_resource_list.
type ModelResource struct {
	ModelID          string `json:"modelId"`
	APIGWResourceURI string `json:"apigwResourceUri"`
	PodCount         int    `json:"podCount"`
	Description      string `json:"description,omitempty"`
}

// Flavor is an instance type (GET /flavors).
type Flavor struct {
	FlavorID   string `json:"flavorId"`
	FlavorName string `json:"flavorName"`
	VCPUs      int    `json:"vcpus,omitempty"`
	RAMMB      int    `json:"ramMb,omitempty"`
	GPUCount   int    `json:"gpuCount,omitempty"`
}

// Image is a training or inference image (GET /images).
type Image struct {
	ImageID          string `json:"imageId"`
	ImageName        string `json:"imageName"`
	ImageTypeCode    string `json:"imageTypeCode,omitempty"` // TRAINING, INFERENCE, NOTEBOOK
	FrameworkCode    string `json:"frameworkCode,omitempty"`
	FrameworkVersion string `json:"frameworkVersion,omitempty"`
	CoreTypeCode     string `json:"coreTypeCode,omitempty"` // CPU, GPU
}

// Algorithm is an algorithm the service provides (GET /algorithms), with
// the metrics its trainings report.
type Algorithm struct {
	AlgorithmID          string   `json:"algorithmId"`
	AlgorithmName        string   `json:"algorithmName"`
	AlgorithmDescription string   `json:"algorithmDescription,omitempty"`
	FrameworkCode        string   `json:"frameworkCode,omitempty"`
	MetricList           []string `json:"metricList,omitempty"`
}

// Experiment groups trainings.
type Experiment struct {
	ExperimentID          string    `json:"experimentId"`
	ExperimentName        string    `json:"experimentName"`
	ExperimentDescription string    `json:"experimentDescription,omitempty"`
	ExperimentStatusCode  string    `json:"experimentStatusCode"`
	StatusReason          string    `json:"statusReason,omitempty"`
	TagList               []Tag     `json:"tagList,omitempty"`
	CreatedDatetime       time.Time `json:"createdDatetime"`
	UpdatedDatetime       time.Time `json:"updatedDatetime"`
}

// Training is one training run. Trials of a tuning are trainings too: they
// carry HyperparameterTuningID and are read with GetTraining.
type Training struct {
	TrainingID             string           `json:"trainingId"`
	TrainingName           string           `json:"trainingName"`
	TrainingDescription    string           `json:"trainingDescription,omitempty"`
	TrainingStatusCode     string           `json:"trainingStatusCode"`
	StatusReason           string           `json:"statusReason,omitempty"`
	ExperimentID           string           `json:"experimentId"`
	HyperparameterTuningID string           `json:"hyperparameterTuningId,omitempty"`
	ImageID                string           `json:"imageId"`
	FlavorID               string           `json:"flavorId"`
	AlgorithmID            string           `json:"algorithmId,omitempty"`
	DistributedNodeCount   int              `json:"distributedNodeCount"`
	UseTorchrun            bool             `json:"useTorchrun,omitempty"`
	NprocPerNode           int              `json:"nprocPerNode,omitempty"`
	DataStorageSize        int              `json:"dataStorageSize,omitempty"`
	SourceDirURI           string           `json:"sourceDirUri,omitempty"`
	EntryPoint             string           `json:"entryPoint,omitempty"`
	ModelUploadURI         string           `json:"modelUploadUri"`
	CheckPointInputURI     string           `json:"checkPointInputUri,omitempty"`
	CheckPointUploadURI    string           `json:"checkPointUploadUri,omitempty"`
	TimeoutHours           int              `json:"timeoutHours"`
	HyperparameterList     []Hyperparameter `json:"hyperparameterList,omitempty"`
	DatasetList            []Dataset        `json:"datasetList,omitempty"`
	TagList                []Tag            `json:"tagList,omitempty"`
	UseLog                 bool             `json:"useLog,omitempty"`
	// MetricList holds the final metric values once the training ran.
	MetricList      []Metric  `json:"metricList,omitempty"`
	CreatedDatetime time.Time `json:"createdDatetime"`
	UpdatedDatetime time.Time `json:"updatedDatetime"`
}

// HyperparameterTuning is a tuning run. When it finished, BestTrainingID
// names its best trial and BestMetricList / BestHyperparameterList carry
// that trial's metric values and hyperparameters.
type HyperparameterTuning struct {
	HyperparameterTuningID          string               `json:"hyperparameterTuningId"`
	HyperparameterTuningName        string               `json:"hyperparameterTuningName"`
	HyperparameterTuningDescription string               `json:"hyperparameterTuningDescription,omitempty"`
	HyperparameterTuningStatusCode  string               `json:"hyperparameterTuningStatusCode"`
	StatusReason                    string               `json:"statusReason,omitempty"`
	ExperimentID                    string               `json:"experimentId"`
	ImageID                         string               `json:"imageId"`
	FlavorID                        string               `json:"flavorId"`
	AlgorithmID                     string               `json:"algorithmId,omitempty"`
	DistributedNodeCount            int                  `json:"distributedNodeCount"`
	ParallelTrialCount              int                  `json:"parallelTrialCount"`
	UseTorchrun                     bool                 `json:"useTorchrun,omitempty"`
	NprocPerNode                    int                  `json:"nprocPerNode,omitempty"`
	DataStorageSize                 int                  `json:"dataStorageSize,omitempty"`
	SourceDirURI                    string               `json:"sourceDirUri,omitempty"`
	EntryPoint                      string               `json:"entryPoint,omitempty"`
	ModelUploadURI                  string               `json:"modelUploadUri"`
	CheckPointInputURI              string               `json:"checkPointInputUri,omitempty"`
	CheckPointUploadURI             string               `json:"checkPointUploadUri,omitempty"`
	TimeoutHours                    int                  `json:"timeoutHours"`
	HyperparameterSpecList          []HyperparameterSpec `json:"hyperparameterSpecList,omitempty"`
	DatasetList                     []Dataset            `json:"datasetList,omitempty"`
	MetricList                      []string             `json:"metricList,omitempty"`
	MetricRegex                     string               `json:"metricRegex,omitempty"`
	ObjectiveMetricName             string               `json:"objectiveMetricName,omitempty"`
	ObjectiveTypeCode               string               `json:"objectiveTypeCode,omitempty"`
	ObjectiveGoal                   *float64             `json:"objectiveGoal,omitempty"`
	MaxFailedTrialCount             int                  `json:"maxFailedTrialCount,omitempty"`
	MaxTrialCount                   int                  `json:"maxTrialCount,omitempty"`
	TuningStrategyName              string               `json:"tuningStrategyName"`
	TuningStrategyRandomState       *int                 `json:"tuningStrategyRandomState,omitempty"`
	EarlyStoppingAlgorithm          string               `json:"earlyStoppingAlgorithm"`
	EarlyStoppingMinTrialCount      int                  `json:"earlyStoppingMinTrialCount"`
	EarlyStoppingStartStep          int                  `json:"earlyStoppingStartStep"`
	TagList                         []Tag                `json:"tagList,omitempty"`
	UseLog                          bool                 `json:"useLog,omitempty"`

	// Progress and results.
	CompletedTrialCount      int              `json:"completedTrialCount"`
	FailedTrialCount         int              `json:"failedTrialCount"`
	EarlyStoppedTrialCount   int              `json:"earlyStoppedTrialCount"`
	TrialList                []Trial          `json:"trialList,omitempty"`
	BestTrainingID           string           `json:"bestTrainingId,omitempty"`
	BestMetricList           []Metric         `json:"bestMetricList,omitempty"`
	BestHyperparameterList   []Hyperparameter `json:"bestHyperparameterList,omitempty"`
	BestObjectiveMetricValue *float64         `json:"bestObjectiveMetricValue,omitempty"`
	CreatedDatetime          time.Time        `json:"createdDatetime"`
	UpdatedDatetime          time.Time        `json:"updatedDatetime"`
}

// Trial is one training a tuning ran (TrainingID reads it with GetTraining).
type Trial struct {
	TrainingID         string           `json:"trainingId"`
	TrialStatusCode    string           `json:"trialStatusCode"` // RUNNING, COMPLETE, EARLY_STOPPED, FAIL_TRAIN
	HyperparameterList []Hyperparameter `json:"hyperparameterList"`
	MetricList         []Metric         `json:"metricList,omitempty"`
}

// Model is a registered model: from a training, from a tuning's best
// training, or from a URI with a framework code.
type Model struct {
	ModelID                string    `json:"modelId"`
	ModelName              string    `json:"modelName"`
	ModelDescription       string    `json:"modelDescription,omitempty"`
	ModelStatusCode        string    `json:"modelStatusCode"`
	StatusReason           string    `json:"statusReason,omitempty"`
	FrameworkCode          string    `json:"frameworkCode,omitempty"`
	ModelURI               string    `json:"modelUri,omitempty"`
	TrainingID             string    `json:"trainingId,omitempty"`
	HyperparameterTuningID string    `json:"hyperparameterTuningId,omitempty"`
	TagList                []Tag     `json:"tagList,omitempty"`
	CreatedDatetime        time.Time `json:"createdDatetime"`
	UpdatedDatetime        time.Time `json:"updatedDatetime"`
}

// Endpoint serves models through stages; it is created with a default
// stage (DefaultEndpointStageID).
type Endpoint struct {
	EndpointID             string    `json:"endpointId"`
	EndpointName           string    `json:"endpointName"`
	EndpointDescription    string    `json:"endpointDescription,omitempty"`
	EndpointStatusCode     string    `json:"endpointStatusCode"`
	StatusReason           string    `json:"statusReason,omitempty"`
	DefaultEndpointStageID string    `json:"defaultEndpointStageId,omitempty"`
	TagList                []Tag     `json:"tagList,omitempty"`
	UseLog                 bool      `json:"useLog,omitempty"`
	CreatedDatetime        time.Time `json:"createdDatetime"`
	UpdatedDatetime        time.Time `json:"updatedDatetime"`
}

// EndpointStage is a stage of an endpoint. APIGWStageURL may come with or
// without a scheme; Predict handles both.
type EndpointStage struct {
	EndpointStageID          string          `json:"endpointStageId"`
	EndpointStageName        string          `json:"endpointStageName"`
	EndpointStageDescription string          `json:"endpointStageDescription,omitempty"`
	EndpointStageStatusCode  string          `json:"endpointStageStatusCode"`
	StatusReason             string          `json:"statusReason,omitempty"`
	EndpointID               string          `json:"endpointId"`
	DefaultStage             bool            `json:"defaultStage"`
	APIGWStageURL            string          `json:"apigwStageUrl"`
	FlavorID                 string          `json:"flavorId"`
	EndpointInstanceCount    int             `json:"endpointInstanceCount"`
	EndpointModelList        []EndpointModel `json:"endpointModelList"`
	TagList                  []Tag           `json:"tagList,omitempty"`
	UseLog                   bool            `json:"useLog,omitempty"`
	CreatedDatetime          time.Time       `json:"createdDatetime"`
	UpdatedDatetime          time.Time       `json:"updatedDatetime"`
}

// EndpointModel is a model served by a stage at APIGWResourceURI.
type EndpointModel struct {
	EndpointModelID         string `json:"endpointModelId"`
	EndpointStageID         string `json:"endpointStageId,omitempty"`
	ModelID                 string `json:"modelId"`
	ModelName               string `json:"modelName,omitempty"`
	APIGWResourceURI        string `json:"apigwResourceUri"`
	PodCount                int    `json:"podCount,omitempty"`
	Description             string `json:"description,omitempty"`
	EndpointModelStatusCode string `json:"endpointModelStatusCode"`
}

// BatchInference runs a model over files under InputDataURI and writes
// the results under OutputUploadURI.
type BatchInference struct {
	BatchInferenceID          string    `json:"batchInferenceId"`
	BatchInferenceName        string    `json:"batchInferenceName"`
	BatchInferenceDescription string    `json:"batchInferenceDescription,omitempty"`
	BatchInferenceStatusCode  string    `json:"batchInferenceStatusCode"`
	StatusReason              string    `json:"statusReason,omitempty"`
	FlavorID                  string    `json:"flavorId"`
	ModelID                   string    `json:"modelId"`
	InstanceCount             int       `json:"instanceCount"`
	TimeoutHours              int       `json:"timeoutHours"`
	PodCount                  int       `json:"podCount"`
	BatchSize                 int       `json:"batchSize"`
	InferenceTimeoutSeconds   int       `json:"inferenceTimeoutSeconds"`
	InputDataURI              string    `json:"inputDataUri"`
	InputDataType             string    `json:"inputDataType"`
	IncludeGlobPattern        string    `json:"includeGlobPattern,omitempty"`
	ExcludeGlobPattern        string    `json:"excludeGlobPattern,omitempty"`
	OutputUploadURI           string    `json:"outputUploadUri"`
	DataStorageSize           int       `json:"dataStorageSize"`
	TagList                   []Tag     `json:"tagList,omitempty"`
	UseLog                    bool      `json:"useLog,omitempty"`
	InputFileCount            int       `json:"inputFileCount,omitempty"`
	InferenceCount            int       `json:"inferenceCount,omitempty"`
	OutputFileList            []string  `json:"outputFileList,omitempty"`
	CreatedDatetime           time.Time `json:"createdDatetime"`
	UpdatedDatetime           time.Time `json:"updatedDatetime"`
}

// CreateExperimentRequest is the body of POST /experiments
// (Experiment().create).
type CreateExperimentRequest struct {
	ExperimentName        string `json:"experimentName"`
	ExperimentDescription string `json:"experimentDescription,omitempty"`
	TagList               []Tag  `json:"tagList,omitempty"`
}

// CreateTrainingRequest is the body of POST /trainings (Training().run),
// with names already resolved to IDs (ResolveImage, ResolveFlavor,
// ResolveAlgorithm). Zero optional fields are not sent.
type CreateTrainingRequest struct {
	ExperimentID         string           `json:"experimentId"`
	TrainingName         string           `json:"trainingName"`
	TrainingDescription  string           `json:"trainingDescription,omitempty"`
	ImageID              string           `json:"imageId"`
	FlavorID             string           `json:"flavorId"`
	DistributedNodeCount int              `json:"distributedNodeCount"`
	UseTorchrun          bool             `json:"useTorchrun,omitempty"`
	NprocPerNode         int              `json:"nprocPerNode,omitempty"`
	DataStorageSize      int              `json:"dataStorageSize,omitempty"`
	AlgorithmID          string           `json:"algorithmId,omitempty"`
	SourceDirURI         string           `json:"sourceDirUri,omitempty"`
	EntryPoint           string           `json:"entryPoint,omitempty"`
	ModelUploadURI       string           `json:"modelUploadUri"`
	CheckPointInputURI   string           `json:"checkPointInputUri,omitempty"`
	CheckPointUploadURI  string           `json:"checkPointUploadUri,omitempty"`
	TimeoutHours         int              `json:"timeoutHours,omitempty"` // 0: the service's 720
	HyperparameterList   []Hyperparameter `json:"hyperparameterList,omitempty"`
	DatasetList          []Dataset        `json:"datasetList,omitempty"`
	TagList              []Tag            `json:"tagList,omitempty"`
	UseLog               bool             `json:"useLog,omitempty"`
}

// CreateTuningRequest is the body of POST /hyperparameter-tunings
// (HyperparameterTuning().run). Zero EarlyStoppingMinTrialCount and
// EarlyStoppingStartStep take the SDK defaults 3 and 4.
type CreateTuningRequest struct {
	ExperimentID                    string               `json:"experimentId"`
	HyperparameterTuningName        string               `json:"hyperparameterTuningName"`
	HyperparameterTuningDescription string               `json:"hyperparameterTuningDescription,omitempty"`
	ImageID                         string               `json:"imageId"`
	FlavorID                        string               `json:"flavorId"`
	DistributedNodeCount            int                  `json:"distributedNodeCount"`
	ParallelTrialCount              int                  `json:"parallelTrialCount"`
	UseTorchrun                     bool                 `json:"useTorchrun,omitempty"`
	NprocPerNode                    int                  `json:"nprocPerNode,omitempty"`
	DataStorageSize                 int                  `json:"dataStorageSize,omitempty"`
	AlgorithmID                     string               `json:"algorithmId,omitempty"`
	SourceDirURI                    string               `json:"sourceDirUri,omitempty"`
	EntryPoint                      string               `json:"entryPoint,omitempty"`
	ModelUploadURI                  string               `json:"modelUploadUri"`
	CheckPointInputURI              string               `json:"checkPointInputUri,omitempty"`
	CheckPointUploadURI             string               `json:"checkPointUploadUri,omitempty"`
	TimeoutHours                    int                  `json:"timeoutHours,omitempty"`
	HyperparameterSpecList          []HyperparameterSpec `json:"hyperparameterSpecList,omitempty"`
	DatasetList                     []Dataset            `json:"datasetList,omitempty"`
	MetricList                      []string             `json:"metricList,omitempty"`
	MetricRegex                     string               `json:"metricRegex,omitempty"`
	ObjectiveMetricName             string               `json:"objectiveMetricName,omitempty"`
	ObjectiveTypeCode               string               `json:"objectiveTypeCode,omitempty"`
	ObjectiveGoal                   *float64             `json:"objectiveGoal,omitempty"`
	MaxFailedTrialCount             int                  `json:"maxFailedTrialCount,omitempty"`
	MaxTrialCount                   int                  `json:"maxTrialCount,omitempty"`
	TuningStrategyName              string               `json:"tuningStrategyName"`
	TuningStrategyRandomState       *int                 `json:"tuningStrategyRandomState,omitempty"`
	EarlyStoppingAlgorithm          string               `json:"earlyStoppingAlgorithm"`
	EarlyStoppingMinTrialCount      int                  `json:"earlyStoppingMinTrialCount,omitempty"`
	EarlyStoppingStartStep          int                  `json:"earlyStoppingStartStep,omitempty"`
	TagList                         []Tag                `json:"tagList,omitempty"`
	UseLog                          bool                 `json:"useLog,omitempty"`
}

// CreateModelRequest is the body of POST /models: exactly one source,
// TrainingID, HyperparameterTuningID (its best training) or ModelURI with
// FrameworkCode (Model().create_by_model_uri).
type CreateModelRequest struct {
	ModelName              string `json:"modelName"`
	ModelDescription       string `json:"modelDescription,omitempty"`
	TrainingID             string `json:"trainingId,omitempty"`
	HyperparameterTuningID string `json:"hyperparameterTuningId,omitempty"`
	FrameworkCode          string `json:"frameworkCode,omitempty"`
	ModelURI               string `json:"modelUri,omitempty"`
	TagList                []Tag  `json:"tagList,omitempty"`
}

// CreateEndpointRequest is the body of POST /endpoints (Endpoint().create);
// the endpoint comes with a default stage.
type CreateEndpointRequest struct {
	EndpointName              string          `json:"endpointName"`
	EndpointDescription       string          `json:"endpointDescription,omitempty"`
	FlavorID                  string          `json:"flavorId"`
	EndpointInstanceCount     int             `json:"endpointInstanceCount,omitempty"` // 0: 1
	EndpointModelResourceList []ModelResource `json:"endpointModelResourceList"`
	TagList                   []Tag           `json:"tagList,omitempty"`
	UseLog                    bool            `json:"useLog,omitempty"`
}

// CreateStageRequest is the body of POST /endpoint-stages
// (Endpoint().create_stage).
type CreateStageRequest struct {
	EndpointID                string          `json:"endpointId"`
	EndpointStageName         string          `json:"endpointStageName"`
	EndpointStageDescription  string          `json:"endpointStageDescription,omitempty"`
	FlavorID                  string          `json:"flavorId"`
	EndpointInstanceCount     int             `json:"endpointInstanceCount,omitempty"`
	EndpointModelResourceList []ModelResource `json:"endpointModelResourceList"`
	TagList                   []Tag           `json:"tagList,omitempty"`
	UseLog                    bool            `json:"useLog,omitempty"`
}

// CreateBatchInferenceRequest is the body of POST /batch-inferences
// (BatchInference().run).
type CreateBatchInferenceRequest struct {
	BatchInferenceName        string `json:"batchInferenceName"`
	BatchInferenceDescription string `json:"batchInferenceDescription,omitempty"`
	FlavorID                  string `json:"flavorId"`
	ModelID                   string `json:"modelId"`
	InstanceCount             int    `json:"instanceCount"`
	TimeoutHours              int    `json:"timeoutHours,omitempty"`
	PodCount                  int    `json:"podCount"`
	BatchSize                 int    `json:"batchSize"`
	InferenceTimeoutSeconds   int    `json:"inferenceTimeoutSeconds"`
	InputDataURI              string `json:"inputDataUri"`
	InputDataType             string `json:"inputDataType"`
	IncludeGlobPattern        string `json:"includeGlobPattern,omitempty"`
	ExcludeGlobPattern        string `json:"excludeGlobPattern,omitempty"`
	OutputUploadURI           string `json:"outputUploadUri"`
	DataStorageSize           int    `json:"dataStorageSize"`
	TagList                   []Tag  `json:"tagList,omitempty"`
	UseLog                    bool   `json:"useLog,omitempty"`
}
