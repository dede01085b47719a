package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/sandbox"
)

// ImageType detects an image's MIME type from its first bytes (PNG, JPEG,
// GIF, WebP); "" when data is none of them.
func ImageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && bytes.Equal(data[:4], []byte("RIFF")) && bytes.Equal(data[8:12], []byte("WEBP")):
		return "image/webp"
	}
	return ""
}

func (fx *fileTools) viewImage(ctx context.Context, raw json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs("view_image", raw, &a); err != nil {
		return "", err
	}
	// Bounded like read_file: an image over the limit is refused by its
	// size, not read whole first.
	data, err := sandbox.ReadFileLimit(ctx, fx.sess, a.Path, int64(fx.maxImage))
	var big *sandbox.FileSizeError
	if errors.As(err, &big) {
		return "", fmt.Errorf("view_image %s: %v (view_image's limit)", a.Path, big)
	}
	if err != nil {
		return "", fmt.Errorf("view_image %s: %w", a.Path, err)
	}
	mime := ImageType(data)
	if mime == "" {
		return "", fmt.Errorf("view_image %s: not a PNG, JPEG, GIF or WebP image (by content; %d bytes)", a.Path, len(data))
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}
