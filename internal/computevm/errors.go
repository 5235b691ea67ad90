package computevm

import (
	"errors"
	"fmt"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
)

// classify is err as a domain kind (googleerr's Compute Engine table). Its
// text starts with the kind ("stockout: …"), as the instance path's records
// have always shown it.
func classify(err error) error {
	var e *failure.Error
	if errors.As(err, &e) {
		return err
	}
	return labelled(googleerr.FromCompute(err))
}

// classifyOperation is the error an operation ended with.
func classifyOperation(op *compute.Operation) error {
	var items []googleerr.OperationItem
	for _, it := range op.Error.Errors {
		items = append(items, googleerr.OperationItem{Code: it.Code, Message: it.Message})
	}
	return labelled(googleerr.ComputeOperation(int(op.HttpErrorStatusCode), items))
}

// failed is a failure of this adapter's own (a listing without end, a
// request it cannot build), of kind k.
func failed(k failure.Kind, err error) error { return labelled(&failure.Error{Kind: k, Err: err}) }

// labelled prefixes a classified error's text with its kind.
func labelled(err error) error {
	k := failure.KindOf(err)
	return &failure.Error{Kind: k, Err: fmt.Errorf("%s: %w", k, err)}
}
