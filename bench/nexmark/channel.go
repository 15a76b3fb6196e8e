package nexmark

import (
	"math/bits"
	"strconv"
	"sync"
)

// ChannelID names a bid's channel and URL (Flink's Bid.channel and Bid.url):
// ids below NumChannels are "channel-<id>", and the NumHotChannels ids after
// them are the hot channels Google, Facebook, Baidu and Apple.
type ChannelID uint16

// Flink's BidGenerator constants.
const (
	NumChannels      = 10_000
	NumHotChannels   = 4
	hotChannelsRatio = 2
)

var hotChannelNames = [NumHotChannels]string{"Google", "Facebook", "Baidu", "Apple"}

// channelTableSeed seeds the java.util.Random that builds the URL table.
// Flink builds it from an unseeded SplittableRandom, so its URLs differ per
// run; a fixed seed makes ours the same everywhere. The value is arbitrary:
// the Nexmark base time.
const channelTableSeed = BaseTime

// channelTable holds every channel's name and URL, built once on first use
// (about 10,000 short strings), so Name and URL never allocate.
var channelTable struct {
	once  sync.Once
	names [NumChannels + NumHotChannels]string
	urls  [NumChannels + NumHotChannels]string
}

func channels() *[NumChannels + NumHotChannels]string {
	channelTable.once.Do(buildChannelTable)
	return &channelTable.names
}

// buildChannelTable follows Flink's BidGenerator: four hot base URLs, then
// for each channel i a base URL that, with probability 9/10, also carries
// &channel_id=<|Integer.reverse(i)|>.
func buildChannelTable() {
	r := newJavaRandom(channelTableSeed)
	for i := range NumHotChannels {
		channelTable.names[NumChannels+i] = hotChannelNames[i]
		channelTable.urls[NumChannels+i] = string(appendBaseURL(nil, &r))
	}
	for i := range NumChannels {
		url := appendBaseURL(nil, &r)
		if r.nextIntn(10) > 0 {
			url = append(url, "&channel_id="...)
			url = strconv.AppendInt(url, int64(javaAbs32(int32(bits.Reverse32(uint32(i))))), 10)
		}
		channelTable.names[i] = "channel-" + strconv.Itoa(i)
		channelTable.urls[i] = string(url)
	}
}

// javaAbs32 is Java's Math.abs(int): the absolute value of MinInt32 is
// MinInt32 (Integer.reverse(1) is exactly that, so channel-1's id is negative
// in Flink too).
func javaAbs32(v int32) int32 {
	if v < 0 {
		return -v // NB: wraps for MinInt32, as in Java.
	}
	return v
}

func appendBaseURL(dst []byte, r *javaRandom) []byte {
	dst = append(dst, "https://www.nexmark.com/"...)
	for range 3 {
		dst = appendString(dst, r, 5, '_')
		dst = append(dst, '/')
	}
	return append(dst, "item.htm?query=1"...)
}

// Name is the channel's name; "" for an id out of range.
func (c ChannelID) Name() string {
	if int(c) >= NumChannels+NumHotChannels {
		return ""
	}
	return channels()[c]
}

// URL is the channel's URL; "" for an id out of range.
func (c ChannelID) URL() string {
	if int(c) >= NumChannels+NumHotChannels {
		return ""
	}
	channels()
	return channelTable.urls[c]
}

// nextChannel draws a bid's channel as Flink's BidGenerator does: a hot
// channel with probability 1 - 1/2, else one of the 10,000 others.
func nextChannel(r *javaRandom) ChannelID {
	if r.nextIntn(hotChannelsRatio) > 0 {
		return ChannelID(NumChannels + r.nextIntn(NumHotChannels))
	}
	return ChannelID(r.nextIntn(NumChannels))
}
