// The one thing client.html needs from livekit-client, bundled by install.sh into the adapter's cache.
import { Room, RoomEvent, VideoPreset, VideoQuality } from 'livekit-client';

window.LiveKit = { Room, RoomEvent, VideoPreset, VideoQuality };
