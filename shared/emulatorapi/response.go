package emulatorapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Response is the emulator's answer to one request.
type Response struct {
	// StatusCode is the HTTP status: 200 on success, 403 when rules deny,
	// 404 for a missing document, 400 or 409 for a failed precondition.
	StatusCode int
	// Status is the error status from the body ("PERMISSION_DENIED",
	// "NOT_FOUND", …); empty on success.
	Status string
	// Message is the error message from the body; for a rules denial it
	// names the rule that failed.
	Message string
	// Body is the raw JSON body.
	Body []byte
}

func newResponse(code int, body []byte) *Response {
	r := &Response{StatusCode: code, Body: body}
	if code/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil {
			r.Status, r.Message = e.Error.Status, strings.TrimSpace(e.Error.Message)
		} else {
			r.Message = strings.TrimSpace(string(body))
		}
	}
	return r
}

// OK reports whether the status code is 2xx.
func (r *Response) OK() bool { return r.StatusCode/100 == 2 }

// Err returns nil for a 2xx response and a *StatusError otherwise.
func (r *Response) Err() error {
	if r.OK() {
		return nil
	}
	return &StatusError{Code: r.StatusCode, Status: r.Status, Message: r.Message}
}

// String summarizes the response for test failure messages.
func (r *Response) String() string {
	if r.OK() {
		return fmt.Sprintf("%d %s", r.StatusCode, http.StatusText(r.StatusCode))
	}
	return fmt.Sprintf("%d %s: %s", r.StatusCode, r.Status, r.Message)
}

// StatusError is a non-2xx answer from the emulator.
type StatusError struct {
	Code    int
	Status  string
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("emulator answered %d", e.Code)
	if e.Status != "" {
		s += " " + e.Status
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Document is a decoded Firestore document.
type Document struct {
	// Name is the full resource name, projects/…/documents/….
	Name string
	// Fields holds decoded values (see DecodeValue).
	Fields     map[string]any
	CreateTime time.Time
	UpdateTime time.Time
}

// Document decodes the body of a successful Get.
func (r *Response) Document() (*Document, error) {
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("emulatorapi: document: %w", err)
	}
	return decodeDocument(r.Body)
}

// Documents decodes the body of a successful List.
func (r *Response) Documents() ([]*Document, error) {
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("emulatorapi: documents: %w", err)
	}
	var list struct {
		Documents []json.RawMessage `json:"documents"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		return nil, fmt.Errorf("emulatorapi: documents: %w", err)
	}
	docs := make([]*Document, 0, len(list.Documents))
	for _, raw := range list.Documents {
		d, err := decodeDocument(raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

func decodeDocument(b []byte) (*Document, error) {
	var raw struct {
		Name       string                     `json:"name"`
		Fields     map[string]json.RawMessage `json:"fields"`
		CreateTime time.Time                  `json:"createTime"`
		UpdateTime time.Time                  `json:"updateTime"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("emulatorapi: decode document: %w", err)
	}
	d := &Document{Name: raw.Name, Fields: make(map[string]any, len(raw.Fields)),
		CreateTime: raw.CreateTime, UpdateTime: raw.UpdateTime}
	for k, v := range raw.Fields {
		x, err := DecodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("emulatorapi: decode field %q of %s: %w", k, raw.Name, err)
		}
		d.Fields[k] = x
	}
	return d, nil
}
