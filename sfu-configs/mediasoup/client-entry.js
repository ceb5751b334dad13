// What client.html needs from mediasoup-client, bundled by install.sh into the adapter's cache.
import { Device } from 'mediasoup-client';

window.Mediasoup = { Device };
